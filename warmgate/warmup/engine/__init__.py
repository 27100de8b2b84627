"""The engine as the runner sees it: its launch, its facts, and its log read line by line."""
