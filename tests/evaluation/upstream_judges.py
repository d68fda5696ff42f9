"""The official judge templates as their sources hold them, fetched from each repository at
the commit named: the shipped prompt files must equal these texts (`test_official_judges`)."""

from __future__ import annotations

LONGMEMEVAL_SOURCE = ("xiaowu0162/LongMemEval", "src/evaluation/evaluate_qa.py",
                      "9e0b455f4ef0e2ab8f2e582289761153549043fc")
LONGMEMEVAL = {
    'single-session-user': (
        'I will give you a question, a correct answer, and a response from a model. '
        'Please answer yes if the response contains the correct answer. Otherwise, '
        'answer no. If the response is equivalent to the correct answer or contains all '
        'the intermediate steps to get the correct answer, you should also answer yes. '
        'If the response only contains a subset of the information required by the '
        'answer, answer no. \n'
        '\n'
        'Question: {}\n'
        '\n'
        'Correct Answer: {}\n'
        '\n'
        'Model Response: {}\n'
        '\n'
        'Is the model response correct? Answer yes or no only.'
    ),
    'temporal-reasoning': (
        'I will give you a question, a correct answer, and a response from a model. '
        'Please answer yes if the response contains the correct answer. Otherwise, '
        'answer no. If the response is equivalent to the correct answer or contains all '
        'the intermediate steps to get the correct answer, you should also answer yes. '
        'If the response only contains a subset of the information required by the '
        'answer, answer no. In addition, do not penalize off-by-one errors for the '
        'number of days. If the question asks for the number of days/weeks/months, etc., '
        'and the model makes off-by-one errors (e.g., predicting 19 days when the answer '
        "is 18), the model's response is still correct. \n"
        '\n'
        'Question: {}\n'
        '\n'
        'Correct Answer: {}\n'
        '\n'
        'Model Response: {}\n'
        '\n'
        'Is the model response correct? Answer yes or no only.'
    ),
    'knowledge-update': (
        'I will give you a question, a correct answer, and a response from a model. '
        'Please answer yes if the response contains the correct answer. Otherwise, '
        'answer no. If the response contains some previous information along with an '
        'updated answer, the response should be considered as correct as long as the '
        'updated answer is the required answer.\n'
        '\n'
        'Question: {}\n'
        '\n'
        'Correct Answer: {}\n'
        '\n'
        'Model Response: {}\n'
        '\n'
        'Is the model response correct? Answer yes or no only.'
    ),
    'single-session-preference': (
        'I will give you a question, a rubric for desired personalized response, and a '
        'response from a model. Please answer yes if the response satisfies the desired '
        'response. Otherwise, answer no. The model does not need to reflect all the '
        'points in the rubric. The response is correct as long as it recalls and '
        "utilizes the user's personal information correctly.\n"
        '\n'
        'Question: {}\n'
        '\n'
        'Rubric: {}\n'
        '\n'
        'Model Response: {}\n'
        '\n'
        'Is the model response correct? Answer yes or no only.'
    ),
    'abstention': (
        'I will give you an unanswerable question, an explanation, and a response from a '
        'model. Please answer yes if the model correctly identifies the question as '
        'unanswerable. The model could say that the information is incomplete, or some '
        'other information is given but the asked information is not.\n'
        '\n'
        'Question: {}\n'
        '\n'
        'Explanation: {}\n'
        '\n'
        'Model Response: {}\n'
        '\n'
        'Does the model correctly identify the question as unanswerable? Answer yes or '
        'no only.'
    ),
}
"""`get_anscheck_prompt`'s five templates, by the question type that gets each (abstention:
the `_abs` questions); single-session-assistant and multi-session get the first."""

MEM0_SOURCE = ("mem0ai/mem0", "evaluation/metrics/llm_judge.py",
               "b3ede5b7c0ac0e847b03786a603c107ac943b3ee")
MEM0_ACCURACY_PROMPT = (
    '\n'
    'Your task is to label an answer to a question as ’CORRECT’ or ’WRONG’. You will '
    'be given the following data:\n'
    '    (1) a question (posed by one user to another user), \n'
    '    (2) a ’gold’ (ground truth) answer, \n'
    '    (3) a generated answer\n'
    'which you will score as CORRECT/WRONG.\n'
    '\n'
    'The point of the question is to ask about something one user should know about '
    'the other user based on their prior conversations.\n'
    'The gold answer will usually be a concise and short answer that includes the '
    'referenced topic, for example:\n'
    'Question: Do you remember what I got the last time I went to Hawaii?\n'
    'Gold answer: A shell necklace\n'
    'The generated answer might be much longer, but you should be generous with your '
    'grading - as long as it touches on the same topic as the gold answer, it should '
    'be counted as CORRECT. \n'
    '\n'
    'For time related questions, the gold answer will be a specific date, month, '
    'year, etc. The generated answer might be much longer or use relative time '
    'references (like "last Tuesday" or "next month"), but you should be generous '
    'with your grading - as long as it refers to the same date or time period as the '
    'gold answer, it should be counted as CORRECT. Even if the format differs (e.g., '
    '"May 7th" vs "7 May"), consider it CORRECT if it\'s the same date.\n'
    '\n'
    "Now it's time for the real question:\n"
    'Question: {question}\n'
    'Gold answer: {gold_answer}\n'
    'Generated answer: {generated_answer}\n'
    '\n'
    'First, provide a short (one sentence) explanation of your reasoning, then '
    'finish with CORRECT or WRONG. \n'
    'Do NOT include both CORRECT and WRONG in your response, or it will break the '
    'evaluation script.\n'
    '\n'
    'Just return the label CORRECT or WRONG in a json format with the key as '
    '"label".\n'
)
"""LoCoMo's judge as mem0's evaluation runs it (`ACCURACY_PROMPT`)."""

EVERMEMBENCH_SOURCE = ("EverMind-AI/EverMemBench", "eval/config/prompts.yaml",
                       "e10b3d52f0e4cfc5c124ad406b5d95c59c73738b")
EVERMEMBENCH_SYSTEM = (
    'You are an expert grader that determines if answers to questions match a gold '
    'standard answer.\n'
)
"""`llm_judge.system_prompt`."""
EVERMEMBENCH_USER = (
    "Your task is to label an answer to a question as 'CORRECT' or 'WRONG'. You will "
    'be given:\n'
    '    (1) a question (about a multi-person group chat),\n'
    "    (2) a 'gold' (ground truth) answer,\n"
    '    (3) a generated answer\n'
    'which you will score as CORRECT/WRONG.\n'
    '\n'
    'The questions are about events, facts, or details mentioned in multi-person '
    'group chat conversations.\n'
    'The gold answer is usually a concise answer that includes the key information.\n'
    '\n'
    'For example:\n'
    'Question: What project was announced on January 9th?\n'
    'Gold answer: Carbon Emission Accounting Platform\n'
    '\n'
    'The generated answer might be longer, but you should be generous with your '
    'grading -\n'
    'as long as it contains the same key information as the gold answer, it should '
    'be CORRECT.\n'
    '\n'
    'For time-related questions, the gold answer will be a specific date/time.\n'
    'The generated answer might use different formats (e.g., "May 7th" vs "7 May" vs '
    '"2025-05-07"),\n'
    'but as long as it refers to the same date/time, it should be CORRECT.\n'
    '\n'
    'For the specific window of date, a +/- 1 day difference is acceptable due to '
    'timezone processing variations.\n'
    '\n'
    'For multiple choice questions where the gold answer is a letter (A/B/C/D),\n'
    'the generated answer should match exactly to be CORRECT.\n'
    '\n'
    'Now grade this:\n'
    'Question: {question}\n'
    'Gold answer: {golden_answer}\n'
    'Generated answer: {generated_answer}\n'
    '\n'
    'First, provide a short (one sentence) explanation of your reasoning,\n'
    'then finish with CORRECT or WRONG.\n'
    'Do NOT include both CORRECT and WRONG in your response.\n'
    '\n'
    'Return the label in JSON format with the key "label": {{"label": "CORRECT"}} or '
    '{{"label": "WRONG"}}\n'
)
"""`llm_judge.user_prompt`."""
