"""Admin commands over the daemon's state database (read-only): jobs, rounds, round show, explain."""
