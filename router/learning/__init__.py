"""Learning from use: labelled examples (`examples`: what they are and the store that keeps them), the
evidence they add to routing (`evidence`), and the decisions remembered for feedback and the examples
feedback turns into (`decisions`)."""
