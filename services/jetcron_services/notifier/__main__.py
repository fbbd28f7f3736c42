from jetcron_services.notifier.service import main
from jetcron_services.runtime import serve

serve("notifier", main)
