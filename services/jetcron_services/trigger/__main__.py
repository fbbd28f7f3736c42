"""python -m jetcron_services.trigger"""

from jetcron_services.runtime import serve
from jetcron_services.trigger.service import main

if __name__ == "__main__":
    serve("trigger", main)
