"""The commands: each builds a load shape from its plan, hands it to the one Harness, and turns
the Outcome into run.json, a report and a few lines on the console."""
