"""checklist."""
