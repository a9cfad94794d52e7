"""grader."""
