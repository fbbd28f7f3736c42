from jetcron_services.gateway.service import main
from jetcron_services.runtime import serve

serve("gateway", main)
