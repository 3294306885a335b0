"""Image data for slimdeploy: record formats, converters, dataset splits, preprocessing, input.

Layout (slim's): one small declarative module per dataset (`digits`, `image_folder`) with
`get_split`, looked up by name through `dataset_factory`; preprocessing looked up by name
through `image_preprocessing`; the tf.data pipeline in `image_input`; the converter CLI in
`convert_images`.
"""
