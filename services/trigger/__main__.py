"""python -m jetcron.services.trigger"""

from jetcron.services.runtime import serve
from jetcron.services.trigger.service import main

if __name__ == "__main__":
    serve("trigger", main)
