"""python -m jetcron.services.placement"""

from jetcron.services.placement.service import main
from jetcron.services.runtime import serve

if __name__ == "__main__":
    serve("placement", main)
