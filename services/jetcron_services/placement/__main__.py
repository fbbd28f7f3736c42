"""python -m jetcron_services.placement"""

from jetcron_services.placement.service import main
from jetcron_services.runtime import serve

if __name__ == "__main__":
    serve("placement", main)
