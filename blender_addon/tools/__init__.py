"""The tools: functions of Blender state returning JSON-able data (`catalogue.py` names the ones offered).

Nothing here touches sockets; every `run` executes on Blender's main thread via dispatch. Importing a tool's
module loads only it: the catalogue loads with the MCP side, at its first use (the Lab's code needs none of it).
"""
