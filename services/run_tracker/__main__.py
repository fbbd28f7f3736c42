"""python -m jetcron.services.run_tracker"""

from jetcron.services.run_tracker.service import main
from jetcron.services.runtime import serve

if __name__ == "__main__":
    serve("run_tracker", main)
