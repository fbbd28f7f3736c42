from jetcron.services.gateway.service import main
from jetcron.services.runtime import serve

serve("gateway", main)
