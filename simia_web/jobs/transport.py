"""kombu's filesystem transport (the embedded default), with the mend the job engine relies on.

kombu creates a message file and then writes it, and a worker listing the folder in between takes
the empty file, fails to parse it and stops ("Unrecoverable error: JSONDecodeError"), losing the
message. Messages are written under a name consumers skip and renamed into place, which is atomic.
`_put` is the method kombu's virtual transports are written to implement (each transport defines
its own); it is not an internal of the filesystem transport that this replaces.
"""

import os
import time
import uuid

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.json import dumps


class FilesystemChannel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs):
        # Same name scheme as kombu's (its consumers take "<sortable time>_<id>.<queue>.msg" in name order).
        name = f"{round(time.monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        path = os.path.join(self.data_folder_out, name)
        partial = f"{path}.part"
        try:
            with open(partial, "wb") as file:
                file.write(dumps(payload).encode())
            os.replace(partial, path)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {path!r} to directory") from exc


class FilesystemTransport(filesystem.Transport):
    Channel = FilesystemChannel
