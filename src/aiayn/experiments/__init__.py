"""The paper's experiments rerun by one command: Table 3's variations (`aiayn ablate`), scaled to a config's size."""
