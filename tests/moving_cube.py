"""A scene for render tests, as code for Blender: the factory scene, 64x48, its cube moving from x=-2 at frame 1 to
x=2 at frame 6, saved as `path`. Run in this process's bpy or sent to a bridge (`execute_blender_code`)."""

from __future__ import annotations

CODE = """
import bpy
bpy.ops.wm.read_homefile(use_factory_startup=True)
scene = bpy.context.scene
scene.render.engine = {engine!r}
scene.cycles.samples, scene.cycles.device = 4, "CPU"
scene.render.resolution_x, scene.render.resolution_y = 64, 48
scene.frame_start, scene.frame_end = 1, 6
cube = bpy.data.objects["Cube"]
for frame, x in ((1, -2.0), (6, 2.0)):
    cube.location.x = x
    cube.keyframe_insert("location", frame=frame)
bpy.ops.wm.save_as_mainfile(filepath={path!r})
result = {{}}
"""


def moving_cube(path: str, engine: str = "BLENDER_WORKBENCH") -> str:
    return CODE.format(path=path, engine=engine)
