"""A stand-in for vLLM, which this environment leaves out: HippoRAG imports its offline engine
at module level even when it talks to an OpenAI-compatible endpoint. Using it raises."""


class _Absent:
    def __init__(self, *args: object, **kwargs: object) -> None:
        raise RuntimeError("vLLM is not installed in HippoRAG 2's environment: its LLM and "
                           "embedder are the OpenAI-compatible endpoint")


class LLM(_Absent):
    pass


class SamplingParams(_Absent):
    pass
