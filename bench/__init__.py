"""pipebench harness: models, timed loader-only / model-only / end-to-end runs, CSV results, CLI."""
