"""`python -m gpuplay.collectives`: one rank (run it under torchrun, or alone as a world of one)."""

from gpuplay.collectives.cli import rank_main

if __name__ == "__main__":
    rank_main(prog_name="python -m gpuplay.collectives")
