"""The jetcron SDK: an async Client, a sync facade, and once() for side effects."""
