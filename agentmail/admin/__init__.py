"""Setting up and checking a bus: bus administration, doctor, the demo."""
