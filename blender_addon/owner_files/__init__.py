"""The files the bridge writes for its own OS user alone: the runtime file agents read, and the log.

Apart from net/ (which uses none of it) and from logging (which only formats): what makes a file
or folder owner-only, and how the endpoint is published and withdrawn.
"""
