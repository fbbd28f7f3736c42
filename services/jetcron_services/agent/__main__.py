"""python -m jetcron_services.agent"""

from jetcron_services.agent.service import main
from jetcron_services.runtime import serve

if __name__ == "__main__":
    serve("agent", main)
