"""Plan completion: the seed buckets that make every reachable step run warmed, greedy and exact."""
