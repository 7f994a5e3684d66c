"""What the router knows of each backend's health: the outlier detector that ejects a failing backend
(`outlier`) and the performance history per backend and intent (`performance`)."""
