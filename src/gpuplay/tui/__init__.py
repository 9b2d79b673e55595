"""The live playground: a Textual app over gpuplay's core engine."""
