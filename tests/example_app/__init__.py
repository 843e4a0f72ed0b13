"""A test-only app that stands for any app of the project: the tests install it to show that its `job_kinds`
module is all a new job kind takes."""
