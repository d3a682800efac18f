"""Command-line interface (argparse)."""
