"""lookout's benchmark suite: a seeded transcript generator, reference passes that do the
minimum work, and a runner that times lookout against them in the same run (``python -m bench``).

See BENCHMARKS.md for the table from a real run and how to repeat it."""
