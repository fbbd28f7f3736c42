from jetcron.services.notifier.service import main
from jetcron.services.runtime import serve

serve("notifier", main)
