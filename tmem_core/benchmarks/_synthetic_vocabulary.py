"""The synthetic benchmark's words: projects, systems, attributes and their values, roles,
channels, phases, and the phrasing of its messages (`_synthetic.py` generates with them)."""

from __future__ import annotations

PROJECTS = ("Atlas", "Borealis", "Cedar", "Dynamo", "Ember", "Falcon", "Granite", "Harbor",
            "Iris", "Juniper", "Kestrel", "Lumen", "Meridian", "Nimbus", "Orchid", "Pioneer")
SYSTEMS = ("checkout", "upload", "billing", "search", "onboarding", "notification",
           "reporting", "login", "export", "inventory")
ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "retry limit": ("3 attempts", "5 attempts", "7 attempts", "2 attempts", "10 attempts"),
    "rollout region": ("EU first", "US first", "APAC first", "Canada first", "all regions"),
    "review cadence": ("weekly", "biweekly", "monthly", "daily", "quarterly"),
    "timeout": ("30 seconds", "60 seconds", "90 seconds", "2 minutes", "15 seconds"),
    "storage backend": ("Postgres", "S3", "Redis", "BigQuery", "DynamoDB"),
    "approval rule": ("two approvers", "one approver plus QA", "a Legal sign-off",
                      "the PM alone", "three approvers"),
    "budget cap": ("$40k", "$55k", "$70k", "$25k", "$90k"),
    "batch size": ("500 rows", "1,000 rows", "2,500 rows", "100 rows", "5,000 rows"),
}
SPARE_VALUES: dict[str, tuple[str, ...]] = {  # never a topic's value: only revisions set them
    "retry limit": ("4 attempts", "6 attempts", "8 attempts"),
    "rollout region": ("LATAM first", "UK first", "internal users first"),
    "review cadence": ("every sprint", "every six weeks", "twice a week"),
    "timeout": ("45 seconds", "5 minutes", "20 seconds"),
    "storage backend": ("Cassandra", "MongoDB", "Elasticsearch"),
    "approval rule": ("the tech lead alone", "one approver plus Security",
                      "a Finance sign-off"),
    "budget cap": ("$35k", "$65k", "$80k"),
    "batch size": ("250 rows", "750 rows", "10,000 rows"),
}
SCOPES = ("card payments only", "enterprise accounts only", "mobile clients only",
          "new customers only", "the public API only", "internal tools only")
CHANNELS = ("#eng", "#product", "#ops", "#design", "#launch", "#qa")
ROLES = ("PM", "backend engineer", "frontend engineer", "designer", "QA lead", "SRE",
         "legal counsel", "data analyst")
PHASES = ("planning", "design", "implementation", "testing", "launch")
NOISE_TOPICS = ("social", "logistics", "tooling")


def slot_values(value: str) -> tuple[str, ...]:
    """Every value of the attribute `value` belongs to, its spares included (what a revision
    of that attribute may set); () when `value` is no attribute's."""
    return next(((*values, *SPARE_VALUES[attribute]) for attribute, values in ATTRIBUTES.items()
                 if value in values), ())


UPDATE_TEMPLATES = (
    "After the load test we are switching to {v} instead.",
    "New plan: {v}, effective immediately.",
    "Numbers are in, going with {v} from now on.",
    "Leadership signed off on {v}, please adjust.",
)
EPISODE_FILLER = (
    "Can someone link the {t.system} dashboard for this?",
    "I'll update the {t.project} tracker once this is settled.",
    "Do we need sign-off from the {t.system} on-call first?",
    "Adding the {t.system} folks to this thread.",
    "Sounds good, no objections from my side.",
    "Let's capture this in the {t.project} decision log.",
    "Any risk for the {t.system} migration?",
)
DISTRACTORS = (
    "Reminder: the {t.system} {t.attribute} is on the agenda for a future sync.",
    "Does anyone remember where the {t.attribute} doc for {t.project} lives?",
    "Unrelated, but {v} came up in the vendor call today.",
    "The {t.system} {t.attribute} wiki page is out of date again.",
    "Is {t.project} still blocked on the {t.attribute} question?",
)
SMALL_TALK = (
    "Anyone up for lunch at the new ramen place?",
    "The {s} dashboard was slow this morning, anyone else?",
    "Happy Friday everyone!",
    "I had to retry the build three times today.",
    "Coffee machine on floor 3 is broken again.",
    "Who has the meeting room booking for tomorrow?",
    "Nice work on the {s} demo yesterday.",
    "Heads up: VPN maintenance tonight.",
)
