"""tmem-eval: distributed batch evaluation of long-term conversational memory methods."""

__version__ = "0.1.0"
