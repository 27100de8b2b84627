"""The draft model's own graphs (eagle, eagle3, mtp) and the sweep that makes them compile."""
