"""The benchmarks behind BENCHMARKS.md, by what each measures: training/, input/, serving/ and advisor/ (``make bench`` runs them all through ``__main__``)."""
