"""python -m jetcron_services.run_tracker"""

from jetcron_services.run_tracker.service import main
from jetcron_services.runtime import serve

if __name__ == "__main__":
    serve("run_tracker", main)
