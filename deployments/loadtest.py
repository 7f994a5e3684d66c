"""Placeholder replaced below."""
from __future__ import annotations
import argparse
def add_loadtest_parser(sub) -> None:
    sub.add_parser("loadtest")
def cmd_loadtest(args: argparse.Namespace) -> int:
    return 1
