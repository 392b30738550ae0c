"""Platform-vs-application attribution of a failed job pod: the evidence, the rules, the verdict."""
