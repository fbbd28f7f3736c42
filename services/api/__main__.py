"""python -m jetcron.services.api"""

from jetcron.services.api.service import main
from jetcron.services.runtime import serve

if __name__ == "__main__":
    serve("api", main)
