"""Page layout analysis: a full-page raster log's orientation, header, sections, tracks, depth fit and value
grids, proposed as a calibration with a confidence and the evidence for each field (`analyse`)."""
