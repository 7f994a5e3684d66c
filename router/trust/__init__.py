"""Trust in what backends say about themselves: every catalog is checked against limits, cleaned of
hidden characters (`untrusted`), scanned for text that addresses the model (`poisoning`) and pinned
(`pins`) before it is served; `review` runs them in that order for one backend."""
