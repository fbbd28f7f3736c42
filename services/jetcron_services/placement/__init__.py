"""The placement service: decides where and in what order runs go."""
