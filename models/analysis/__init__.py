"""Head analyses over one sentence or a corpus: statistics, redundancy, importance, rollout, published figures."""
