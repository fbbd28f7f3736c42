"""python -m jetcron.services.agent"""

from jetcron.services.agent.service import main
from jetcron.services.runtime import serve

if __name__ == "__main__":
    serve("agent", main)
