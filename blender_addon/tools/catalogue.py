"""The tool catalogue: every tool the bridge offers, by name."""

from __future__ import annotations

from .api_lookup import LOOKUP_BLENDER_API
from .base import Tool
from .blendfile import BLENDFILE_TOOLS
from .code import EXECUTE_BLENDER_CODE
from .frame_task_tools import FRAME_TASK_TOOLS
from .frames import RENDER_FRAMES
from .history import CHECKPOINT_TOOLS, UNDO_TOOLS
from .job_bundles import EXPORT_RENDER_JOB
from .montage import VIEW_MONTAGE
from .node_trees import GET_NODE_TREE
from .node_types import DESCRIBE_NODE_TYPE
from .render import RENDER_TOOLS
from .scene import GET_OBJECT_DETAIL_SUMMARY, GET_OBJECTS_SUMMARY
from .screen import SCREEN_TOOLS

CATALOGUE: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        GET_OBJECTS_SUMMARY,
        GET_OBJECT_DETAIL_SUMMARY,
        *BLENDFILE_TOOLS,
        EXECUTE_BLENDER_CODE,
        LOOKUP_BLENDER_API,
        DESCRIBE_NODE_TYPE,
        GET_NODE_TREE,
        *SCREEN_TOOLS,
        VIEW_MONTAGE,
        *RENDER_TOOLS,
        RENDER_FRAMES,
        *FRAME_TASK_TOOLS,
        EXPORT_RENDER_JOB,
        *UNDO_TOOLS,
        *CHECKPOINT_TOOLS,
    )
}
