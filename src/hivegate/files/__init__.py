"""Uploaded files: their bytes (:mod:`~hivegate.files.blobs`), uploads and reads with the owner rule
(:mod:`~hivegate.files.uploads`), and attachments by ``file_id`` for every plane
(:mod:`~hivegate.files.attachments`)."""
