"""Head analyses over one sentence or a corpus: statistics, redundancy, importance, rollout, published figures;
and the mask checker (`mask_checker`), which runs the model under a mask."""
