"""scoreband inside the tools people already use (optional extras)."""
