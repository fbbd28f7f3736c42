"""python -m jetcron_services.api"""

from jetcron_services.api.service import main
from jetcron_services.runtime import serve

if __name__ == "__main__":
    serve("api", main)
