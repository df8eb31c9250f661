"""The coordinator as an HTTP service: devices enrol, poll for signed orders and post their replies
(:mod:`~pategail.server.net.service`); the mailboxes between the training thread and the service
(:mod:`~pategail.server.net.hub`); the enrolled devices (:mod:`~pategail.server.net.roster`); and the
:class:`~pategail.server.fleet.Fleet` the coordinator sees (:mod:`~pategail.server.net.fleet`)."""
