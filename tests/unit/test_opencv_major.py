"""The OpenCV a test job runs on is the one it says it runs on.

``make test-opencv5`` puts OpenCV 5.x first on ``PYTHONPATH`` and sets
``HF_EXPECT_OPENCV=5``; were the folder not picked up, every test of that job would run
on 4.x again and prove nothing. The default job runs on the project's dependency (4.x).
"""

import os

import cv2


def test_the_job_runs_on_the_opencv_it_names():
    expected = os.environ.get("HF_EXPECT_OPENCV", "4")
    assert cv2.__version__.split(".")[0] == expected, cv2.__file__
